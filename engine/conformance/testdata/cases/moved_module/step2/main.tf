# module.a gains count: its object moves to module.a[0] (Terraform does
# not move module instances implicitly). module.b is replaced by
# module.c: its resource moves across the module calls.
module "a" {
  count  = 1
  source = "./mod"
  name   = "a"
}

moved {
  from = module.a
  to   = module.a[0]
}

module "c" {
  source = "./mod"
  name   = "b"
}

moved {
  from = module.b.terraform_data.r
  to   = module.c.terraform_data.r
}

output "a" { value = module.a[0].id }
