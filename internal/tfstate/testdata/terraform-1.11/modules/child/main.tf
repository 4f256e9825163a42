variable "prefix" { type = string }
resource "terraform_data" "inner" {
  input = "${var.prefix}-inner"
}
output "id" { value = terraform_data.inner.id }
