variable "name" {
  type    = string
  default = "app"
}

variable "replicas" {
  type    = number
  default = 3
}

variable "enabled" {
  type    = bool
  default = true
}

variable "zones" {
  type    = list(string)
  default = ["a", "b"]
}

variable "labels" {
  type    = map(string)
  default = { team = "core", tier = "web" }
}

variable "spec" {
  type = object({
    size  = number
    ports = set(number)
  })
  default = { size = 2, ports = [443, 80] }
}

variable "untyped" {
  default = { a = [1, 2], b = "x" }
}

variable "coerced" {
  type    = list(number)
  default = ["1", "2"]
}

resource "terraform_data" "all" {
  input = {
    name     = var.name
    replicas = var.replicas
    enabled  = var.enabled
    zones    = var.zones
    labels   = var.labels
    spec     = var.spec
    untyped  = var.untyped
    coerced  = var.coerced
  }
}

output "ports" { value = var.spec.ports }
output "input" { value = terraform_data.all.input }
