data "terraform_remote_state" "network" {
  backend = "local"
  config = {
    path = "../network/terraform.tfstate"
  }
  defaults = {
    name  = "dflt"
    extra = "x"
  }
}

data "terraform_remote_state" "dev" {
  backend   = "local"
  workspace = "dev"
  config = {
    workspace_dir = "../network/terraform.tfstate.d"
  }
}

output "network" { value = data.terraform_remote_state.network.outputs }
output "dev" { value = data.terraform_remote_state.dev.outputs.name }
