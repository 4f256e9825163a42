terraform {
  required_providers {
    p6 = { source = "registry.example.com/stackd/p6", version = "~> 1.0" }
  }
}
variable "world" { type = string }
provider "p6" {
  region = "eu-west-1"
  dir    = var.world
  prefix = "eu-west-1-"
  token  = "provider-token-secret"
}
resource "p6_thing" "app" {
  for_each = toset(["a", "b"])
  name     = "app-${each.key}"
  content  = "hello ${each.key}"
  secret   = "resource-secret-value"
  tag {
    key   = "owner"
    value = "platform"
  }
}
