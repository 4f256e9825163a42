// Package tfplugin5 holds the Go and gRPC stubs of the Terraform plugin
// protocol version 5, generated from tfplugin5.proto exactly as HashiCorp
// publishes it in terraform-plugin-go (tag v0.31.0, commit
// 09a1181b051c53a3700401895ae281afbc91f0fc, file
// tfprotov5/internal/tfplugin5/tfplugin5.proto; protocol 5.11, MPL-2.0),
// with only its go_package option changed to this package's import path.
//
// Regenerate with "go generate" in this directory. The generated files were
// made with these tools, and should be regenerated with the same ones so that
// a diff shows only what the .proto changed:
//
//	protoc                libprotoc 3.21.12 (Debian package protobuf-compiler)
//	protoc-gen-go         google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	protoc-gen-go-grpc    google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
//
// The two plugins must be on PATH ("go install" of the two paths above puts
// them in $(go env GOPATH)/bin).
//
// Only package tfplugin uses these stubs; nothing else should import them.
package tfplugin5

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative tfplugin5.proto
