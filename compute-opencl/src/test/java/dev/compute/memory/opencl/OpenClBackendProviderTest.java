package dev.compute.memory.opencl;

import static dev.compute.memory.opencl.OpenClTestSupport.requireOpenCl;
import static dev.compute.memory.opencl.OpenClTestSupport.settings;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSelection;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.ComputeBackendProvider;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;

class OpenClBackendProviderTest {

    private final OpenClBackendProvider provider = new OpenClBackendProvider();

    @Test
    void isFoundByTheServiceLoaderBetweenCpuAndCuda() {
        List<ComputeBackendProvider> found = BackendSelection.providers(getClass().getClassLoader());
        assertThat(found).anySatisfy(p -> assertThat(p).isInstanceOf(OpenClBackendProvider.class));
        assertThat(provider.name()).isEqualTo("opencl");
        assertThat(provider.priority()).isEqualTo(50).isGreaterThan(0).isLessThan(100);
    }

    @Test
    void anUnknownDeviceTypeIsUnavailableAndSaysWhatIsAllowed() {
        BackendAvailability availability = provider.availability(settings(Map.of(OpenClBackendProvider.DEVICE_TYPE_OPTION, "gpux")));
        assertThat(availability.available()).isFalse();
        assertThat(availability.detail()).contains("'gpux'", "gpu, cpu, accelerator, all", "device-type");
    }

    @Test
    void isAvailableWithDefaultSettingsAndNamesTheDevice() {
        requireOpenCl();
        BackendAvailability availability = provider.availability(OpenClTestSupport.defaultSettings());
        OpenClDevice first = OpenClDevices.enumerate().stream().min(Comparator.comparingInt(OpenClDevice::typeRank)).orElseThrow();
        assertThat(availability.available()).isTrue();
        assertThat(availability.detail()).contains("OpenCL device 0 of", first.deviceName(), first.platformName());
    }

    @Test
    void aPlatformNameThatMatchesNothingIsUnavailableAndListsThePlatformsFound() {
        requireOpenCl();
        BackendAvailability availability = provider.availability(settings(Map.of(OpenClBackendProvider.PLATFORM_OPTION, "no-such-platform")));
        assertThat(availability.available()).isFalse();
        assertThat(availability.detail()).contains("no OpenCL platform's name or vendor contains 'no-such-platform'", "platforms found");
        for (OpenClDevice device : OpenClDevices.enumerate()) {
            assertThat(availability.detail()).contains(device.platformName());
        }
        assertThatThrownBy(() -> provider.create(settings(Map.of(OpenClBackendProvider.PLATFORM_OPTION, "no-such-platform"))))
                .isInstanceOf(BackendUnavailableException.class).hasMessageContaining("no-such-platform");
    }

    @Test
    void poclIsFoundByThePlatformOptionPoclWhereItIsInstalled() {
        requireOpenCl();
        OpenClDevice pocl = OpenClDevices.enumerate().stream().filter(d -> d.platformVendor().toLowerCase(Locale.ROOT).contains("pocl"))
                .findFirst().orElse(null);
        org.junit.jupiter.api.Assumptions.assumeTrue(pocl != null, "no PoCL platform here");
        BackendAvailability byName = provider.availability(settings(Map.of(OpenClBackendProvider.PLATFORM_OPTION, "pocl")));
        assertThat(byName.available()).as(byName.detail()).isTrue();
        assertThat(byName.detail()).contains("Portable Computing Language");
        BackendAvailability byIndex = provider.availability(settings(Map.of(OpenClBackendProvider.PLATFORM_OPTION,
                String.valueOf(pocl.platformIndex()))));
        assertThat(byIndex.available()).as(byIndex.detail()).isTrue();
        assertThat(byIndex.detail()).contains("Portable Computing Language");
    }

    @Test
    void thePlatformIsMatchedByANameFragmentIgnoringCase() {
        requireOpenCl();
        OpenClDevice any = OpenClDevices.enumerate().getLast();
        String fragment = any.platformName().substring(0, Math.min(6, any.platformName().length())).toUpperCase(Locale.ROOT);
        BackendAvailability availability = provider.availability(settings(Map.of(OpenClBackendProvider.PLATFORM_OPTION, fragment)));
        assertThat(availability.available()).isTrue();
        assertThat(availability.detail()).containsIgnoringCase(fragment);
    }

    @Test
    void theDeviceTypeSelectsOnlyDevicesOfThatType() {
        requireOpenCl();
        List<OpenClDevice> all = OpenClDevices.enumerate();
        for (String type : List.of("gpu", "cpu", "accelerator")) {
            BackendAvailability availability = provider.availability(settings(Map.of(OpenClBackendProvider.DEVICE_TYPE_OPTION, type)));
            if (all.stream().anyMatch(d -> d.typeName().equals(type))) {
                assertThat(availability.available()).as(type).isTrue();
                assertThat(availability.detail()).as(type).contains("(" + type + ", ");
            } else {
                assertThat(availability.available()).as(type).isFalse();
                assertThat(availability.detail()).as(type).contains("no OpenCL device of type '" + type + "'", "devices found");
            }
        }
    }

    @Test
    void poclIsFoundAsACpuDeviceByPlatformAndType() {
        requireOpenCl();
        boolean hasPocl = OpenClDevices.enumerate().stream().anyMatch(d -> d.platformName().contains("Portable Computing Language"));
        org.junit.jupiter.api.Assumptions.assumeTrue(hasPocl || System.getenv("CI") != null, "PoCL is not installed here");
        BackendAvailability availability = provider.availability(settings(Map.of(
                OpenClBackendProvider.PLATFORM_OPTION, "portable", OpenClBackendProvider.DEVICE_TYPE_OPTION, "CPU")));
        assertThat(availability.available()).isTrue();
        assertThat(availability.detail()).contains("(cpu, ", "Portable Computing Language");
    }

    @Test
    void devicesAreNumberedAcceleratorsBeforeCpus() {
        requireOpenCl();
        List<OpenClDevice> all = OpenClDevices.enumerate();
        int best = all.stream().mapToInt(OpenClDevice::typeRank).min().orElseThrow();
        for (int index = 0; index < all.size(); index++) {
            OpenClDevices.Choice choice = OpenClDevices.choose(new BackendSettings(index, true, 1 << 20, Map.of()));
            assertThat(choice.device()).isNotNull();
            if (index == 0) {
                assertThat(choice.device().typeRank()).isEqualTo(best);
            } else {
                OpenClDevice previous = OpenClDevices.choose(new BackendSettings(index - 1, true, 1 << 20, Map.of())).device();
                assertThat(choice.device().typeRank()).isGreaterThanOrEqualTo(previous.typeRank());
            }
        }
    }

    @Test
    void aDeviceIndexBeyondTheMatchingDevicesIsUnavailableAndListsThem() {
        requireOpenCl();
        int count = OpenClDevices.enumerate().size();
        BackendAvailability availability = provider.availability(new BackendSettings(count, true, 1 << 20, Map.of()));
        assertThat(availability.available()).isFalse();
        assertThat(availability.detail()).contains("device index " + count + " is out of range", count + " OpenCL device(s) match");
    }

    @Test
    void theSelectionChoosesOpenClByNameAndCreatesABackendOnTheDevice() {
        requireOpenCl();
        BackendSettings settings = OpenClTestSupport.defaultSettings();
        BackendSelection selection = BackendSelection.choose("opencl", settings, List.of(provider));
        assertThat(selection.provider()).isSameAs(provider);
        try (ComputeBackend backend = selection.provider().create(settings)) {
            assertThat(backend.info().backend()).isEqualTo("opencl");
            assertThat(backend.info().deviceTotalBytes()).isPositive();
            assertThat(backend.memoryInfo().totalBytes()).isEqualTo(backend.info().deviceTotalBytes());
            assertThat(backend.memoryInfo().freeBytes()).isEqualTo(-1);
        }
    }

    @Test
    void autoPassesOverACpuDeviceUnlessACpuDeviceIsAskedFor() {
        requireOpenCl();
        OpenClDevice chosen = OpenClDevices.choose(settings(Map.of())).device();
        assertThat(chosen).isNotNull();
        String reason = provider.autoPassOverReason(settings(Map.of()));
        if ("cpu".equals(chosen.typeName())) {
            assertThat(reason).contains("the chosen device is a CPU", "compute.backend=opencl");
            assertThat(provider.autoPassOverReason(settings(Map.of(OpenClBackendProvider.DEVICE_TYPE_OPTION, "cpu")))).isNull();
        } else {
            assertThat(reason).as("an accelerator is taken by auto").isNull();
        }
    }
}
