output "paths" {
  value = {
    module    = path.module
    root      = path.root
    workspace = terraform.workspace
    file      = file("${path.module}/data.txt")
  }
}
