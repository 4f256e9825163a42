resource "terraform_data" "new" {
  input = "payload"
}

moved {
  from = terraform_data.old
  to   = terraform_data.new
}

resource "terraform_data" "keyed" {
  for_each = toset(["n0", "n1"])
  input    = each.key
}

moved {
  from = terraform_data.listed[0]
  to   = terraform_data.keyed["n0"]
}

moved {
  from = terraform_data.listed[1]
  to   = terraform_data.keyed["n1"]
}

module "renamed" {
  source = "./mod"
}

moved {
  from = module.inner
  to   = module.renamed
}
