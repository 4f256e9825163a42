resource "terraform_data" "x" {
  input = "in the module"
}
