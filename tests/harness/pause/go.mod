module ichor.dev/tests/harness/pause

go 1.26
