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

removed {
  from = p6_thing.keep

  lifecycle {
    destroy = false
  }
}

removed {
  from = p6_thing.drop

  lifecycle {
    destroy = true
  }
}
