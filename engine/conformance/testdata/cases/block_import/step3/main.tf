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

locals {
  objects = {
    one = "original"
    two = "changed on import"
  }
}

import {
  for_each = local.objects
  to       = p6_thing.adopted[each.key]
  id       = "made-${each.key}"
}

resource "p6_thing" "adopted" {
  for_each = local.objects
  name     = "made-${each.key}"
  content  = each.value
}
