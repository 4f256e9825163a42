variable "env" {
  type    = string
  default = "prod"

  validation {
    condition     = contains(["dev", "prod"], var.env)
    error_message = "The env must be dev or prod."
  }
}

variable "cidr" {
  type    = string
  default = "10.0.0.0/16"

  validation {
    condition     = can(cidrhost(var.cidr, 0))
    error_message = "The cidr must be a CIDR block."
  }

  validation {
    condition     = endswith(var.cidr, "/16")
    error_message = "The cidr must be a /16."
  }
}

variable "nothing" {
  type     = string
  default  = null
  nullable = true
}

variable "never_null" {
  type     = string
  default  = "kept"
  nullable = false
}

resource "terraform_data" "v" {
  input = "${var.env}:${var.cidr}:${coalesce(var.nothing, "none")}:${var.never_null}"
}

output "v" { value = terraform_data.v.input }
