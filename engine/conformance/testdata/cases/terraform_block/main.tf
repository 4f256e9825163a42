terraform {
  required_version = ">= 1.5.0, < 2.0.0"

  required_providers {
    p6 = {
      source  = "registry.example.com/stackd/p6"
      version = ">= 1.0.0"
    }
  }

  backend "local" {
    path = "terraform.tfstate"
  }
}

variable "world" { type = string }

provider "p6" {
  region = "eu-west-1"
  dir    = var.world
}

provider "p6" {
  alias  = "other"
  region = "us-east-1"
  prefix = "other-"
  dir    = var.world
}

resource "p6_thing" "default" {
  name = "default-region"
}

resource "p6_thing" "aliased" {
  provider = p6.other
  name     = "other-region"
}

module "child" {
  source = "./child"
  providers = {
    p6.main = p6.other
  }
}

output "regions" { value = [p6_thing.default.region, p6_thing.aliased.region, module.child.region] }
