module github.com/ichor-dev/ichor/tests/oracle

go 1.26.6

require (
	github.com/blang/semver/v4 v4.0.0
	github.com/siderolabs/talos/pkg/machinery v1.13.9
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/planetscale/vtprotobuf v0.6.1-0.20250313105119-ba97887b0a25 // indirect
	github.com/siderolabs/gen v0.8.7 // indirect
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/text v0.37.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260504160031-60b97b32f348 // indirect
	google.golang.org/grpc v1.81.0 // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
)
