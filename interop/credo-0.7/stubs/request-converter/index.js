// The two functions @credo-ts/core 0.7.0 imports from @verifiables/request-converter, for
// mdoc device requests. No DIDComm path reaches them; if one ever does, it says so.
function unavailable(name) {
  return () => {
    throw new Error(`${name}: @verifiables/request-converter is a stub in the interop install`)
  }
}

export const convertDcqlQueryToDeviceRequest = unavailable('convertDcqlQueryToDeviceRequest')
export const convertPresentationDefinitionToDeviceRequest = unavailable(
  'convertPresentationDefinitionToDeviceRequest'
)
