variable "name" {
  type        = string
  description = "The service's name."
}

variable "environment" {
  type    = string
  default = "dev"

  validation {
    condition     = contains(["dev", "staging", "prod"], var.environment)
    error_message = "environment must be dev, staging or prod."
  }
}

variable "components" {
  type    = set(string)
  default = ["api"]
}

variable "tags" {
  type = object({
    owner       = string
    cost_center = optional(string, "shared")
  })
}
