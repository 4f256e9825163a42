variable "version" { type = string }
variable "workers" { type = number }

# count is Heat's: how many SUCCESS signals complete the condition.
resource "wait_condition" "workers_up" {
  count    = var.workers
  timeout  = "10m"
  triggers = { version = var.version }
}

resource "command" "worker" {
  count  = var.workers
  create = "echo starting worker ${count.index} ${var.version} && curl -fsS -X POST -H 'Content-Type: application/json' -d '{\"status\": \"SUCCESS\", \"id\": \"worker-${count.index}\", \"data\": \"10.0.${count.index}.10:8080\"}' '${wait_condition.workers_up.handle_url}'"
  update = "echo restarting worker ${count.index} on ${var.version} && curl -fsS -X POST -d '{\"id\": \"worker-${count.index}\", \"data\": \"10.0.${count.index}.10:8080\"}' '${wait_condition.workers_up.handle_url}'"
  delete = "echo stopping worker ${count.index}"

  update_pattern {
    pattern        = "rolling"
    batch_size     = 2
    min_in_service = 2
  }
}

resource "file" "lb" {
  path    = "lb/backends.conf"
  content = join("\n", [for id, addr in wait_condition.workers_up.data : "server ${id} ${addr}"])
}

output "ready" { value = wait_condition.workers_up.status }
