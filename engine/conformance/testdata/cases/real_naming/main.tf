variable "prefix" {
  type    = list(string)
  default = ["Contoso", "app"]
}

variable "suffix" {
  type    = list(string)
  default = ["we", "001"]
}

variable "unique_seed" {
  type    = string
  default = "subscription-0001"
}

locals {
  unique   = substr(sha256(var.unique_seed), 0, 6)
  slug     = lower(join("-", concat(var.prefix, ["{type}"], var.suffix)))
  compact  = lower(join("", concat(var.prefix, ["{type}"], var.suffix)))

  rules = {
    resource_group  = { slug = "rg", max = 90, dashes = true, scope = "subscription" }
    storage_account = { slug = "st", max = 24, dashes = false, scope = "global" }
    key_vault       = { slug = "kv", max = 24, dashes = true, scope = "global" }
    virtual_network = { slug = "vnet", max = 64, dashes = true, scope = "resourceGroup" }
  }

  names = {
    for k, r in local.rules : k => {
      name        = substr(replace(r.dashes ? local.slug : local.compact, "{type}", r.slug), 0, r.max)
      name_unique = substr(replace(r.dashes ? "${local.slug}-${local.unique}" : "${local.compact}${local.unique}", "{type}", r.slug), 0, r.max)
      valid       = can(regex(r.dashes ? "^[a-z0-9-]+$" : "^[a-z0-9]+$", replace(r.dashes ? local.slug : local.compact, "{type}", r.slug)))
      scope       = r.scope
      max_length  = r.max
    }
  }
}

resource "terraform_data" "name" {
  for_each = local.names
  input    = each.value
}

output "names" { value = { for k, v in local.names : k => v.name_unique } }
output "all_valid" { value = alltrue([for v in local.names : v.valid]) }
