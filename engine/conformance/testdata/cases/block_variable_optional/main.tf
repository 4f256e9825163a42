variable "services" {
  type = map(object({
    port     = number
    protocol = optional(string, "tcp")
    public   = optional(bool, false)
    tags     = optional(map(string), {})
    health = optional(object({
      path     = optional(string, "/healthz")
      interval = optional(number, 30)
    }), {})
    note = optional(string)
  }))
  default = {
    web = { port = 443, public = true, tags = { tier = "front" } }
    api = { port = 8080, health = { interval = 10 } }
    db  = { port = 5432, protocol = "postgres", health = null }
  }
}

resource "terraform_data" "svc" {
  for_each = var.services
  input    = each.value
}

output "services" { value = var.services }
