variable "namespace" {
  type = string
}

variable "environment" {
  type = string
}

variable "name" {
  type = string
}

variable "attributes" {
  type    = list(string)
  default = []
}

variable "delimiter" {
  type    = string
  default = "-"
}

variable "tags" {
  type    = map(string)
  default = {}
}
