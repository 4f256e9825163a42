terraform {
  required_providers {
    p6 = {
      source                = "registry.example.com/stackd/p6"
      version               = "~> 1.0"
      configuration_aliases = [p6.second]
    }
  }
}

variable "name" { type = string }

resource "p6_thing" "first" {
  name = "first-${var.name}"
}

resource "p6_thing" "second" {
  provider = p6.second
  name     = "second-${var.name}"
}

output "regions" { value = [p6_thing.first.region, p6_thing.second.region] }
