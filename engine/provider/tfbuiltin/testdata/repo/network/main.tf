output "name" { value = "alpha" }
output "secret" {
  value     = "fixture-secret"
  sensitive = true
}
output "obj" { value = { n = 1, l = [1, 2] } }
output "list" { value = tolist(["a", "b"]) }
output "nothing" { value = null }
