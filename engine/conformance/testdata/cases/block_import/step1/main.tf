terraform {
  required_providers {
    p6 = {
      source  = "registry.example.com/stackd/p6"
      version = "~> 1.0"
    }
  }
}

variable "world" {
  type        = string
  description = "Directory the test provider keeps its objects in."
}

provider "p6" {
  region = "eu-west-1"
  dir    = var.world
}

# Objects made outside the configuration's control: step 2 forgets them and
# imports them again, once as they are and once with a change.
resource "p6_thing" "made" {
  for_each = toset(["one", "two"])
  name     = "made-${each.key}"
  content  = "original"
}
