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
  alias  = "east"
  region = "us-east-1"
  prefix = "e-"
  dir    = var.world
}

provider "p6" {
  alias  = "west"
  region = "us-west-2"
  prefix = "w-"
  dir    = var.world
}

module "pair" {
  for_each = toset(["one", "two"])
  source   = "./mod"
  name     = each.key

  providers = {
    p6        = p6.east
    p6.second = p6.west
  }
}

resource "p6_thing" "after" {
  provider   = p6.east
  name       = "after"
  content    = join(",", sort([for k, m in module.pair : m.regions[1]]))
  depends_on = [module.pair]
}

output "regions" { value = { for k, m in module.pair : k => m.regions } }
