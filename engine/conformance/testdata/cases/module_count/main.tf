variable "zones" {
  type    = list(string)
  default = ["a", "b", "c"]
}

module "zone" {
  count  = length(var.zones)
  source = "./mod"
  zone   = var.zones[count.index]
  index  = count.index
}

module "off" {
  count  = 0
  source = "./mod"
  zone   = "none"
  index  = -1
}

output "zones" { value = module.zone[*].label }
