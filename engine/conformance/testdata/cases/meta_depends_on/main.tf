resource "terraform_data" "first" {
  input = "first"
}

resource "terraform_data" "second" {
  input      = "second"
  depends_on = [terraform_data.first]
}

module "after" {
  source     = "./mod"
  depends_on = [terraform_data.second]
}

output "m" { value = module.after.v }
