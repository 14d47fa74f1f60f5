// Package kvrelaypb is the generated Go code of relay.proto, goindex's copy
// of Dynamo's dynamo.kvrelay.v1 contract: messages (relay.pb.go) and the
// gRPC client and server interfaces (relay_grpc.pb.go). Do not edit the
// generated files; edit relay.proto and run bridge/kvrelay/generate.sh.
package kvrelaypb
