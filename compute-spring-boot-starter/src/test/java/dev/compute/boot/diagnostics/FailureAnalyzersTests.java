package dev.compute.boot.diagnostics;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.boot.testing.UnattachedDeviceBackendProvider;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Configuration;

/** Start-up as a user sees it: the analyzers are found through spring.factories and their report is printed. */
@ExtendWith(OutputCaptureExtension.class)
class FailureAnalyzersTests {

    @Test
    void anInvalidSizeIsReportedWithPropertyValueAllowedAndAction(CapturedOutput output) {
        assertThatThrownBy(() -> start("--compute.memory.pooling.max-pool-size=-1GB")).isNotNull();
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("A compute memory setting is invalid:")
                .contains("Property: compute.memory.pooling.max-pool-size")
                .contains("Value: \"-1073741824 bytes\"")
                .contains("Origin: \"compute.memory.pooling.max-pool-size\" from property source \"commandLineArgs\"")
                .contains("Allowed: a positive size, such as 512MB or 4GB")
                .contains("Change compute.memory.pooling.max-pool-size to a positive size");
    }

    @Test
    void aBadSettingOfANamedManagerIsReportedUnderItsOwnName(CapturedOutput output) {
        assertThatThrownBy(() -> start("--compute.managers.cpu.backend=cpu", "--compute.managers.gpu.backend=cpu",
                "--compute.managers.gpu.memory.pooling.max-pool-size=0")).isNotNull();
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("Property: compute.managers.gpu.memory.pooling.max-pool-size")
                .contains("Value: \"0 bytes\"")
                .contains("Origin: \"compute.managers.gpu.memory.pooling.max-pool-size\" from property source \"commandLineArgs\"")
                .contains("Change compute.managers.gpu.memory.pooling.max-pool-size to a positive size");
    }

    @Test
    void aNamedManagersRuleBetweenAnInheritedAndAnOwnValueNamesEachWhereItWasSet(CapturedOutput output) {
        assertThatThrownBy(() -> start("--compute.memory.pooling.warmup.host[0].size=2MB", "--compute.managers.x.backend=cpu",
                "--compute.managers.x.memory.pooling.release-threshold=1MB")).isNotNull();
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("Property: compute.memory.pooling.warmup.host\n")
                .contains("Origin: \"compute.memory.pooling.warmup.host[0].size\" from property source \"commandLineArgs\"")
                .contains("Allowed: at most compute.managers.x.memory.pooling.release-threshold (1048576 bytes)")
                .contains("Related: compute.managers.x.memory.pooling.release-threshold (\"compute.managers.x.memory.pooling.release-threshold\""
                        + " from property source \"commandLineArgs\")")
                .doesNotContain("Property: compute.managers.x.memory.pooling.warmup.host", "at most compute.memory.pooling.release-threshold");
    }

    @Test
    void aRuleWithADefaultSaysTheOtherValueIsTheDefault(CapturedOutput output) {
        assertThatThrownBy(() -> start("--compute.memory.pooling.release-threshold=5GB")).isNotNull();
        assertThat(output).contains("Property: compute.memory.pooling.release-threshold")
                .contains("Related: compute.memory.pooling.max-pool-size (not set: its default)");
    }

    @Test
    void aNamedManagerOptsOutOfTheInheritedWarmupWithAnEmptyList() {
        start("--compute.memory.pooling.warmup.host[0].size=2MB", "--compute.managers.x.backend=cpu",
                "--compute.managers.x.memory.pooling.release-threshold=1MB", "--compute.managers.x.memory.pooling.warmup.host=");
    }

    @Test
    void anUnknownEnumValueIsReportedWithTheAllowedValuesInsteadOfBootsGenericBindReport(CapturedOutput output) {
        assertThatThrownBy(() -> start("--compute.memory.leak-detection=verbose")).isNotNull();
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("Property: compute.memory.leak-detection")
                .contains("Value: \"verbose\"")
                .contains("Origin: \"compute.memory.leak-detection\" from property source \"commandLineArgs\"")
                .contains("Allowed: one of disabled, simple, paranoid")
                .doesNotContain("Failed to bind properties under");
    }

    /**
     * A key left empty in application.yml ({@code limit:} with nothing after it, which YAML gives as the empty string)
     * where the starter's binding refuses what it leaves unbound: Spring's report said only that the element "was left
     * unbound", not what the property may be.
     */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "compute.budgets.search.limit | compute.budgets.search.request-limit=1MB",
            "compute.budgets.search.request-limit | compute.budgets.search.limit=1MB",
            "compute.budgets.search.location-limits.host | compute.budgets.search.limit=1MB",
            "compute.budgets.search.reservations.host | compute.budgets.search.limit=1MB",
            "compute.managers.gpu.budgets.search.limit | compute.managers.gpu.backend=cpu",
            "compute.managers.gpu.budgets.search.location-limits.host | compute.managers.gpu.budgets.search.limit=1MB",
            "compute.managers.gpu.memory.pooling.trim-interval | compute.managers.gpu.backend=cpu",
            "compute.memory.pooling.warmup.host[0].size | compute.backend=cpu",
            "compute.managers.gpu.memory.pooling.warmup.host[0].size | compute.managers.gpu.backend=cpu"})
    void anEmptyValueIsReportedWithWhatItsPropertyAllows(String property, String other, CapturedOutput output) {
        assertThatThrownBy(() -> start("--" + property + "=", "--" + other)).isNotNull();
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("Property: " + property + "\n")
                .contains("Value: \"\"")
                .contains("Origin: \"" + property + "\" from property source \"commandLineArgs\"")
                .contains(property.endsWith("trim-interval") ? "Allowed: a duration: a whole number with a unit" : "Allowed: a size: a whole number with a unit")
                .doesNotContain("left unbound");
    }

    /** A budget name of letters beyond ASCII's: Spring's binding drops them and fails with "No converter found", naming no key. */
    @Test
    void aBudgetNameTheBindingCannotTakeIsReportedAsWritten(CapturedOutput output) {
        assertThatThrownBy(() -> start("--compute.budgets.é.limit=1MB")).isNotNull();
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("Property: compute.budgets.é\n")
                .contains("a budget name of lower-case letters, digits and dashes, as written")
                .doesNotContain("No converter found");
    }

    /**
     * A budget or a manager written as a value where its settings go ({@code budgets: {search: 4GB}}): Spring's report
     * said only "No converter found" for a budget, and "a value of type Map" for its limits by location, naming no
     * setting it takes.
     */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "compute.budgets.search | 4GB | compute.backend=cpu | settings below it (limit, location-limits, reservations, request-limit), not a value of its own",
            "compute.budgets.search.reservations | 1GB | compute.budgets.search.limit=8GB | settings below it, each under its name, not a value of its own",
            "compute.managers.gpu.budgets.search | 4GB | compute.managers.gpu.backend=cpu | settings below it (limit, location-limits, reservations, request-limit), not a value of its own"})
    void aValueWhereSettingsGoIsReportedWithWhatGoesThere(String property, String value, String other, String allowed, CapturedOutput output) {
        assertThatThrownBy(() -> start("--compute.backend=cpu", "--" + other, "--" + property + "=" + value)).isNotNull();
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("Property: " + property + "\n")
                .contains("Value: \"" + value + "\"")
                .contains("Allowed: " + allowed + "\n")
                .doesNotContain("No converter found", "a value of type");
    }

    @Test
    void anUnavailableBackendIsReportedWithItsReason(CapturedOutput output) {
        assertThatThrownBy(() -> start("--compute.backend=" + UnattachedDeviceBackendProvider.NAME)).isNotNull();
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("The compute backend '" + UnattachedDeviceBackendProvider.NAME + "' (compute.backend) cannot run here:")
                .contains(UnattachedDeviceBackendProvider.REASON)
                .contains("Set compute.backend to auto");
    }

    /**
     * A named manager whose backend cannot run: the report names that manager and the properties that chose its backend
     * and device, where they were set, in the description, the provider's reason and the action. It named compute.backend
     * and compute.device, which were not set at all.
     */
    @ParameterizedTest
    @CsvSource(delimiter = '|', quoteCharacter = '"', value = {
            "compute.managers.gpu.backend=" + UnattachedDeviceBackendProvider.NAME + " | '" + UnattachedDeviceBackendProvider.NAME
                    + "' of manager 'gpu' (compute.managers.gpu.backend) | Set compute.managers.gpu.backend to auto",
            "compute.managers.gpu.backend=cpu;compute.managers.gpu.device=3 | 'cpu' of manager 'gpu' (compute.managers.gpu.backend) "
                    + "| compute.managers.gpu.device is 3",
            // inherited: compute.backend is where the value was set
            "compute.backend=" + UnattachedDeviceBackendProvider.NAME + ";compute.managers.gpu.device=0 | '"
                    + UnattachedDeviceBackendProvider.NAME + "' of manager 'gpu' (compute.backend) | Set compute.backend to auto"})
    void aNamedManagersUnavailableBackendIsReportedUnderItsOwnProperties(String settings, String backend, String advice, CapturedOutput output) {
        List<String> args = new ArrayList<>(List.of("--compute.managers.cpu.backend=cpu"));
        Arrays.stream(settings.split(";")).map(setting -> "--" + setting).forEach(args::add);
        assertThatThrownBy(() -> start(args.toArray(String[]::new))).isNotNull();
        assertThat(output).contains("APPLICATION FAILED TO START")
                .contains("The compute backend " + backend + " cannot run here:")
                .contains(advice)
                .doesNotContain("compute.device is", "(a driver, a device, compute.device)", "at compute.device 0");
    }

    private static void start(String... args) {
        new SpringApplicationBuilder(Application.class).web(WebApplicationType.NONE).run(args).close();
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Application {}
}
