output "datetime_functions" {
  value = {
    formatdate   = formatdate("YYYY-MM-DD hh:mm:ss ZZZ", "2024-02-29T13:04:05Z")
    formatdate2  = formatdate("EEE, DD MMM YYYY h:mmaa", "2024-02-29T13:04:05+02:00")
    timeadd      = timeadd("2024-02-29T23:30:00Z", "1h45m")
    timecmp      = timecmp("2024-01-01T00:00:00Z", "2023-12-31T23:00:00-02:00")
  }
}
