module "a" {
  source = "./mod"
  name   = "a"
}

module "b" {
  source = "./mod"
  name   = "b"
}

output "a" { value = module.a.id }
