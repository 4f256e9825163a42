module "label" {
  source   = "./modules/label"
  for_each = var.components

  namespace   = "acme"
  environment = var.environment
  name        = var.name
  attributes  = [each.key]
  tags        = var.tags
}

# terraform_data implies Terraform's built-in provider: no provider block,
# no required_providers entry.
resource "terraform_data" "component" {
  for_each = module.label

  input = {
    id   = each.value.id
    tags = each.value.tags
  }
}

check "names_fit" {
  assert {
    condition     = alltrue([for l in module.label : length(l.id) <= 64])
    error_message = "A label is longer than 64 characters."
  }
}
