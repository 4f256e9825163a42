terraform {
  required_providers {
    p6 = {
      source  = "registry.example.com/stackd/p6"
      version = "~> 1.0"
    }
  }
}

variable "service_id" { type = string }
variable "name" { type = string }
variable "port" { type = number }
variable "public" { type = bool }

resource "p6_thing" "endpoint" {
  name    = var.name
  content = "${var.service_id}:${var.port}"
  mode    = var.public ? "0644" : "0600"
}

output "address" { value = "${var.public ? "public" : "internal"}://${p6_thing.endpoint.id}:${var.port}" }
