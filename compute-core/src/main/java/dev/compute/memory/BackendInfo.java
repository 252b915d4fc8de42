package dev.compute.memory;

/** Which backend and device a manager runs on. */
public record BackendInfo(String backend, int deviceIndex, String deviceName, long deviceTotalBytes) {}
