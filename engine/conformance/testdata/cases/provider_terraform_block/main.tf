terraform {
  required_providers {
    terraform = {
      source = "terraform.io/builtin/terraform"
    }
  }
}

# The built-in provider needs no configuration; its block is accepted.
provider "terraform" {}

resource "terraform_data" "d" {
  input = {
    name      = "built-in"
    workspace = terraform.workspace
  }
}

output "out" { value = terraform_data.d.output }
