locals {
  buckets = {
    logs   = { days = 30 }
    backup = { days = 365 }
  }
}

resource "terraform_data" "map" {
  for_each = local.buckets
  input    = "${each.key}:${each.value.days}"
}

resource "terraform_data" "set" {
  for_each = toset(["b", "a", "c"])
  input    = upper(each.value)
}

resource "terraform_data" "chained" {
  for_each = terraform_data.map
  input    = "${each.key} <- ${each.value.input}"
}

output "keys" { value = keys(terraform_data.set) }
output "chained" { value = { for k, v in terraform_data.chained : k => v.input } }
