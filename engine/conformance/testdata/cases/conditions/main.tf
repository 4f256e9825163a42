variable "size" {
  type    = number
  default = 3
}

resource "terraform_data" "pool" {
  input = { size = var.size, name = "pool" }

  lifecycle {
    precondition {
      condition     = var.size > 0 && var.size <= 10
      error_message = "The size must be between 1 and 10."
    }

    postcondition {
      condition     = self.output.size == var.size
      error_message = "The pool must keep its size."
    }
  }
}

output "size" {
  value = terraform_data.pool.output.size

  precondition {
    condition     = terraform_data.pool.input.name == "pool"
    error_message = "The pool is named pool."
  }
}
