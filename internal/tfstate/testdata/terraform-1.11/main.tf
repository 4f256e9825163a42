variable "names" {
  type    = set(string)
  default = ["a", "b"]
}
variable "password" {
  type      = string
  default   = "hunter2-secret"
  sensitive = true
}
resource "terraform_data" "single" {
  input = "hello"
}
resource "terraform_data" "counted" {
  count = 2
  input = "n-${count.index}"
}
resource "terraform_data" "each" {
  for_each         = var.names
  input            = { name = each.key, upstream = terraform_data.single.id }
  triggers_replace = [each.key]
}
resource "terraform_data" "secret" {
  input = var.password
}
module "child" {
  source   = "./modules/child"
  prefix = "x"
}
output "single_id" { value = terraform_data.single.id }
