variable "context" {
  type = object({
    enabled     = bool
    namespace   = optional(string)
    environment = optional(string)
    stage       = optional(string)
    name        = optional(string)
    attributes  = optional(list(string), [])
    tags        = optional(map(string), {})
    delimiter   = optional(string)
    label_order = optional(list(string))
  })
  default = {
    enabled = true
  }
  description = "Settings inherited from a parent label; the other variables win over it."
}

variable "namespace" {
  type    = string
  default = null
}

variable "environment" {
  type    = string
  default = null
}

variable "stage" {
  type    = string
  default = null
}

variable "name" {
  type    = string
  default = null
}

variable "attributes" {
  type    = list(string)
  default = []
}

variable "tags" {
  type    = map(string)
  default = {}
}

variable "delimiter" {
  type    = string
  default = null
}

variable "label_order" {
  type    = list(string)
  default = null

  validation {
    condition = var.label_order == null ? true : alltrue([
      for l in var.label_order : contains(["namespace", "environment", "stage", "name", "attributes"], l)
    ])
    error_message = "Labels are namespace, environment, stage, name and attributes."
  }
}

variable "id_length_limit" {
  type    = number
  default = 0
}
