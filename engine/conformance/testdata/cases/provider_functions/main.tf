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

variable "parts" {
  type    = list(string)
  default = ["eu", "1"]
}

variable "secret" {
  type      = string
  default   = "hush"
  sensitive = true
}

provider "p6" {
  region = "eu-west-1"
  dir    = var.world
}

locals {
  label = provider::p6::label("web", var.parts...)
}

resource "p6_thing" "app" {
  name    = lower(local.label)
  content = provider::p6::label("content", terraform.workspace)
}

resource "terraform_data" "derived" {
  input = {
    from_id   = provider::p6::label("id", p6_thing.app.id)
    from_name = provider::p6::label("name", p6_thing.app.name)
  }
}

output "label" { value = local.label }
output "in_for" { value = [for p in var.parts : provider::p6::label(p)] }
output "from_id" { value = provider::p6::label("x", p6_thing.app.id) }
output "derived" { value = terraform_data.derived.output }
output "secret" {
  value     = provider::p6::label("s", var.secret)
  sensitive = true
}
