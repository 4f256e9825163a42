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

variable "tags" {
  type    = map(string)
  default = { env = "prod", team = "core", cost = "" }
}

resource "p6_thing" "d" {
  name = "dynamic"

  dynamic "tag" {
    for_each = { for k, v in var.tags : k => v if v != "" }
    content {
      key   = tag.key
      value = upper(tag.value)
    }
  }

  dynamic "tag" {
    for_each = ["extra"]
    iterator = t
    content {
      key = t.value
    }
  }
}

output "tags" { value = p6_thing.d.tag }
