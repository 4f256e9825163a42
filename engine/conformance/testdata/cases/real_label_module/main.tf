module "base" {
  source = "./modules/label"

  namespace   = "Acme"
  environment = "eu_west"
  stage       = "prod"
  tags        = { CostCenter = "1234" }
}

module "db" {
  source     = "./modules/label"
  context    = module.base.context
  name       = "orders-db"
  attributes = ["Primary", "replica"]
}

module "long" {
  source          = "./modules/label"
  context         = module.db.context
  name            = "a-very-long-component-name-that-will-not-fit"
  delimiter       = "."
  label_order     = ["name", "stage", "namespace"]
  id_length_limit = 24
}

resource "terraform_data" "db" {
  input = {
    name = module.db.id
    tags = module.db.tags
  }
}

output "ids" { value = [module.base.id, module.db.id, module.long.id] }
output "db_tags" { value = module.db.tags }
