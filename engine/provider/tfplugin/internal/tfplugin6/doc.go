// Package tfplugin6 holds the Go and gRPC stubs of the Terraform plugin
// protocol version 6, generated from tfplugin6.proto exactly as HashiCorp
// publishes it in terraform-plugin-go (tag v0.31.0, commit
// 09a1181b051c53a3700401895ae281afbc91f0fc, file
// tfprotov6/internal/tfplugin6/tfplugin6.proto; protocol 6.11, MPL-2.0),
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
package tfplugin6

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative tfplugin6.proto
