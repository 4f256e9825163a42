resource "terraform_data" "where" {
  input = {
    module    = path.module
    root      = path.root
    workspace = terraform.workspace
  }
}

module "leaf" {
  source = "./modules/leaf"
}

output "root" { value = terraform_data.where.input }
output "leaf" { value = module.leaf.paths }
