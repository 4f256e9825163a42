terraform {
  required_providers {
    p6 = {
      source  = "registry.example.com/stackd/p6"
      version = "~> 1.0"
    }
  }
}

variable "world" { type = string }

provider "p6" {
  region = "eu-west-1"
  prefix = "prod-"
  dir    = var.world
}

variable "services" {
  type = map(object({
    image     = string
    replicas  = optional(number, 1)
    endpoints = optional(map(object({
      port   = number
      public = optional(bool, false)
    })), {})
    settings = optional(object({
      color = optional(string, "blue")
      size  = optional(number)
    }), {})
  }))
  default = {
    checkout = {
      image    = "checkout:2.1"
      replicas = 2
      endpoints = {
        http    = { port = 8080, public = true }
        metrics = { port = 9090 }
      }
    }
    worker = {
      image    = "worker:1.0"
      settings = { size = 4 }
    }
  }
}

module "service" {
  for_each = var.services
  source   = "./modules/service"

  name     = each.key
  spec     = each.value
}

output "endpoints" {
  value = merge([for s in module.service : s.endpoints]...)
}

output "ids" { value = { for k, s in module.service : k => s.id } }
