terraform {
  required_providers {
    p6 = {
      source  = "registry.example.com/stackd/p6"
      version = "~> 1.0"
    }
  }
}

variable "world" {
  type        = string
  description = "Directory the test provider keeps its objects in."
}

provider "p6" {
  region = "eu-west-1"
  dir    = var.world
}

resource "p6_thing" "app" {
  name    = "app2"
  content = "version 2"
  secret  = "s3cr3t"

  settings = {
    color = "green"
    size  = 3
  }

  tag {
    key   = "env"
    value = "prod"
  }

  tag {
    key = "owner"
  }
}

resource "p6_thing" "dependent" {
  name    = "dependent"
  content = "next to ${p6_thing.app.id} in ${p6_thing.app.region}"
}

data "p6_object" "app" {
  id = p6_thing.app.id
}

output "id" { value = p6_thing.app.id }
output "mode" { value = p6_thing.app.mode }
output "read_back" { value = data.p6_object.app.content }
