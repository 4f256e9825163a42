variable "version" { type = string }

resource "file" "release" {
  path    = "app/release"
  content = "version=${var.version}\nregion=${target.region}\n"
}

output "version" { value = var.version }
