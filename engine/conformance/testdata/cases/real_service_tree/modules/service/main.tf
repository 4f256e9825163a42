terraform {
  required_providers {
    p6 = {
      source  = "registry.example.com/stackd/p6"
      version = "~> 1.0"
    }
  }
}

variable "name" { type = string }

variable "spec" {
  type = object({
    image     = string
    replicas  = number
    endpoints = map(object({ port = number, public = bool }))
    settings  = object({ color = string, size = number })
  })
}

resource "p6_thing" "service" {
  name    = var.name
  content = jsonencode({ image = var.spec.image, replicas = var.spec.replicas })

  settings = {
    color = var.spec.settings.color
    size  = var.spec.settings.size
  }

  dynamic "tag" {
    for_each = var.spec.endpoints
    content {
      key   = tag.key
      value = tostring(tag.value.port)
    }
  }
}

module "endpoint" {
  for_each = var.spec.endpoints
  source   = "../endpoint"

  service_id = p6_thing.service.id
  name       = "${var.name}-${each.key}"
  port       = each.value.port
  public     = each.value.public
}

output "id" { value = p6_thing.service.id }
output "endpoints" { value = { for k, e in module.endpoint : "${var.name}/${k}" => e.address } }
