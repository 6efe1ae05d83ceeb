module github.com/ichor-dev/ichor/tests/oracle/modproxy

go 1.26.5

require golang.org/x/mod v0.37.0
