terraform {
  required_providers {
    p6 = {
      source                = "registry.example.com/stackd/p6"
      configuration_aliases = [p6.main]
    }
  }
}

resource "p6_thing" "in_child" {
  provider = p6.main
  name     = "child"
}

output "region" { value = p6_thing.in_child.region }
