variable "vpc_cidr" {
  type    = string
  default = "10.20.0.0/16"
}

variable "zones" {
  type    = list(string)
  default = ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
}

variable "tiers" {
  type = map(object({
    newbits = number
    public  = optional(bool, false)
  }))
  default = {
    public  = { newbits = 8, public = true }
    private = { newbits = 4 }
    data    = { newbits = 8 }
  }
}

locals {
  tier_names = sort(keys(var.tiers))
  tier_blocks = zipmap(local.tier_names, cidrsubnets(var.vpc_cidr, [for t in local.tier_names : var.tiers[t].newbits - 2]...))
  pairs = setproduct(local.tier_names, var.zones)
}

module "tier" {
  for_each = var.tiers
  source   = "./modules/subnets"

  tier   = each.key
  cidr   = local.tier_blocks[each.key]
  zones  = var.zones
  public = each.value.public
}

resource "terraform_data" "route" {
  for_each = { for p in local.pairs : "${p[0]}-${p[1]}" => p if var.tiers[p[0]].public }
  input = {
    tier   = each.value[0]
    zone   = each.value[1]
    subnet = module.tier[each.value[0]].subnets[each.value[1]]
  }
}

output "tier_blocks" { value = local.tier_blocks }
output "subnets" { value = { for k, m in module.tier : k => m.subnets } }
output "routes" { value = sort(keys(terraform_data.route)) }
