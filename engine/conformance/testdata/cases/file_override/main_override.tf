variable "size" {
  default = 5
}

locals {
  env = "prod"
}

resource "terraform_data" "o" {
  triggers_replace = "overridden"
}
